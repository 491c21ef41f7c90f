//! Parsed ELF files (goblin), cached process-wide so each file is parsed once.
//!
//! An [`ElfFile`] owns the file's bytes and a digested copy of what the other layers need:
//! function and data symbols, sections, loadable segments, and DWARF code ranges.
//! All addresses here are svmas (as stated in the file).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use goblin::elf::{dynamic, header, program_header, section_header, sym, Elf};

/// Why an ELF file could not be loaded.
#[derive(thiserror::Error, Debug)]
pub enum ElfError {
    /// The file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The file is not a well-formed ELF file.
    #[error("{}: cannot parse ELF: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        reason: String,
    },
}

/// The kind of a digested symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SymKind {
    /// `STT_FUNC`.
    Func,
    /// `STT_GNU_IFUNC`: the address is the resolver.
    Ifunc,
    /// `STT_OBJECT` or `STT_COMMON`.
    Object,
}

/// A digested symbol from `.symtab` or `.dynsym`.
#[derive(Debug, Clone)]
struct Symbol {
    name: String,
    addr: u64,
    size: u64,
    kind: SymKind,
    binding: u8,
}

/// A digested section header.
#[derive(Debug, Clone)]
struct Section {
    name: String,
    addr: u64,
    offset: u64,
    size: u64,
    flags: u64,
    nobits: bool,
}

/// A digested `PT_LOAD` segment.
#[derive(Debug, Clone)]
struct Segment {
    vaddr: u64,
    offset: u64,
    filesz: u64,
    memsz: u64,
}

/// A section of an ELF file: its svma range and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct SectionRef<'a> {
    /// The section's start svma.
    pub svma: u64,
    /// The section's size in memory.
    pub size: u64,
    /// The section's offset in the file (meaningless for `SHT_NOBITS`).
    pub file_offset: usize,
    /// The section's bytes in the file (empty for `SHT_NOBITS`).
    pub data: &'a [u8],
}

/// How many symbols to look back when searching a containing symbol.
const SYMBOL_LOOKBACK: usize = 512;

/// A parsed ELF file. Obtain one with [`ElfFile::load`].
pub struct ElfFile {
    path: PathBuf,
    data: Vec<u8>,
    entry: u64,
    e_type: u16,
    interpreter: Option<String>,
    flags_1: u64,
    sections: Vec<Section>,
    segments: Vec<Segment>,
    /// Sorted by address, deduplicated by (name, address).
    symbols: Vec<Symbol>,
    /// The `NT_GNU_BUILD_ID` note's bytes.
    build_id: Option<Vec<u8>>,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile")
            .field("path", &self.path)
            .field("entry", &self.entry)
            .field("symbols", &self.symbols.len())
            .finish_non_exhaustive()
    }
}

/// The process-wide cache of parsed files.
fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<ElfFile>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<ElfFile>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

impl ElfFile {
    /// Loads and parses `path`, or returns the cached result of an earlier load.
    pub fn load(path: &Path) -> Result<Arc<ElfFile>, ElfError> {
        if let Some(elf) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(elf.clone());
        }
        let data = std::fs::read(path).map_err(|source| ElfError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let elf = Arc::new(Self::parse(path.to_path_buf(), data)?);
        let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        Ok(cache.entry(path.to_path_buf()).or_insert(elf).clone())
    }

    /// Parses the bytes of an ELF file (not cached).
    fn parse(path: PathBuf, data: Vec<u8>) -> Result<ElfFile, ElfError> {
        let elf = Elf::parse(&data).map_err(|e| ElfError::Parse {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let sections = elf
            .section_headers
            .iter()
            .map(|sh| Section {
                name: elf
                    .shdr_strtab
                    .get_at(sh.sh_name)
                    .unwrap_or_default()
                    .to_string(),
                addr: sh.sh_addr,
                offset: sh.sh_offset,
                size: sh.sh_size,
                flags: sh.sh_flags,
                nobits: sh.sh_type == section_header::SHT_NOBITS,
            })
            .collect();
        let segments = elf
            .program_headers
            .iter()
            .filter(|ph| ph.p_type == program_header::PT_LOAD)
            .map(|ph| Segment {
                vaddr: ph.p_vaddr,
                offset: ph.p_offset,
                filesz: ph.p_filesz,
                memsz: ph.p_memsz,
            })
            .collect();
        let mut symbols = Vec::new();
        for (table, strtab) in [(&elf.syms, &elf.strtab), (&elf.dynsyms, &elf.dynstrtab)] {
            for s in table.iter() {
                let kind = match s.st_type() {
                    sym::STT_FUNC => SymKind::Func,
                    sym::STT_GNU_IFUNC => SymKind::Ifunc,
                    sym::STT_OBJECT | sym::STT_COMMON => SymKind::Object,
                    _ => continue,
                };
                let shndx = s.st_shndx as u32;
                if shndx == section_header::SHN_UNDEF || shndx == section_header::SHN_ABS {
                    continue;
                }
                let Some(name) = strtab.get_at(s.st_name).filter(|n| !n.is_empty()) else {
                    continue;
                };
                symbols.push(Symbol {
                    name: name.to_string(),
                    addr: s.st_value,
                    size: s.st_size,
                    kind,
                    binding: s.st_bind(),
                });
            }
        }
        symbols.sort_by(|a, b| (a.addr, &a.name).cmp(&(b.addr, &b.name)));
        symbols.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        let flags_1 = elf.dynamic.as_ref().map_or(0, |d| d.info.flags_1);
        let build_id = build_id_note(&elf, &data);
        Ok(ElfFile {
            build_id,
            entry: elf.entry,
            e_type: elf.header.e_type,
            interpreter: elf.interpreter.map(str::to_string),
            flags_1,
            sections,
            segments,
            symbols,
            path,
            data,
        })
    }

    /// The path this file was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw bytes of the file.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// All svmas of `STT_FUNC` symbols (from `.symtab` and `.dynsym`) named exactly `name`,
    /// sorted and deduplicated. Versioned duplicates (`pthread_cond_wait@GLIBC_2.2.5` and
    /// `@GLIBC_2.3.2`) have the same name without version, so both are returned.
    pub fn function_addresses(&self, name: &str) -> Vec<u64> {
        self.addresses_of(name, |k| k == SymKind::Func)
    }

    /// All svmas of `STT_OBJECT` symbols named exactly `name` (e.g. `_r_debug`).
    pub fn object_addresses(&self, name: &str) -> Vec<u64> {
        self.addresses_of(name, |k| k == SymKind::Object)
    }

    /// Addresses of the symbols named `name` whose kind passes `keep`.
    fn addresses_of(&self, name: &str, keep: impl Fn(SymKind) -> bool) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .symbols
            .iter()
            .filter(|s| keep(s.kind) && s.name == name)
            .map(|s| s.addr)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The function or data symbol containing `svma`, as (name, offset into it).
    /// Names are not demangled.
    pub fn symbolize(&self, svma: u64) -> Option<(String, u64)> {
        self.containing(svma, |_| true)
    }

    /// The data (`STT_OBJECT`, not TLS) symbol containing `svma`, as (name, offset).
    pub fn object_symbol(&self, svma: u64) -> Option<(String, u64)> {
        self.containing(svma, |k| k == SymKind::Object)
    }

    /// The best symbol of an accepted kind containing `svma`. Among aliases at the same
    /// address, prefers fewer leading underscores, then global binding, then the shorter name.
    fn containing(&self, svma: u64, keep: impl Fn(SymKind) -> bool) -> Option<(String, u64)> {
        let end = self.symbols.partition_point(|s| s.addr <= svma);
        let start = end.saturating_sub(SYMBOL_LOOKBACK);
        let mut best: Option<&Symbol> = None;
        for s in self.symbols[start..end].iter().rev() {
            if let Some(b) = best {
                if s.addr != b.addr {
                    break;
                }
            }
            let contains = svma < s.addr.saturating_add(s.size) || (s.size == 0 && svma == s.addr);
            if !keep(s.kind) || !contains {
                continue;
            }
            if best.is_none_or(|b| symbol_rank(s) < symbol_rank(b)) {
                best = Some(s);
            }
        }
        best.map(|s| (s.name.clone(), svma - s.addr))
    }

    /// The svma the first `PT_LOAD` segment starts at, page-aligned down.
    pub fn first_load_vaddr(&self) -> u64 {
        self.segments.first().map_or(0, |s| s.vaddr & !0xfff)
    }

    /// The svma that the page at file offset `offset` is mapped at, according to the
    /// `PT_LOAD` segment covering that offset (page-aligned arithmetic).
    pub fn svma_for_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| {
                let start = s.offset & !0xfff;
                offset >= start && offset < s.offset + s.filesz.max(1)
            })
            .map(|s| (s.vaddr & !0xfff) + (offset - (s.offset & !0xfff)))
    }

    /// True when the file has no `PT_INTERP` (statically linked or the loader itself).
    pub fn is_static(&self) -> bool {
        self.interpreter.is_none()
    }

    /// True for `ET_DYN` files (PIE executables, shared libraries): loaded at a bias.
    pub fn is_pie(&self) -> bool {
        self.e_type == header::ET_DYN
    }

    /// True for a static PIE: `ET_DYN`, no interpreter, and `DF_1_PIE` set.
    pub fn is_static_pie(&self) -> bool {
        self.is_pie() && self.is_static() && self.flags_1 & dynamic::DF_1_PIE != 0
    }

    /// The `PT_INTERP` path, if any.
    pub fn interpreter(&self) -> Option<&str> {
        self.interpreter.as_deref()
    }

    /// The entry point svma (`e_entry`).
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The `SHF_EXECINSTR` sections as (svma, bytes).
    pub fn executable_sections(&self) -> Vec<(u64, &[u8])> {
        self.sections
            .iter()
            .filter(|s| s.flags & u64::from(section_header::SHF_EXECINSTR) != 0 && !s.nobits)
            .filter_map(|s| Some((s.addr, self.section_bytes(s)?)))
            .collect()
    }

    /// The section named `name` (e.g. `.eh_frame`), if present.
    pub fn section(&self, name: &str) -> Option<SectionRef<'_>> {
        let s = self.sections.iter().find(|s| s.name == name)?;
        let data = if s.nobits {
            &[][..]
        } else {
            self.section_bytes(s)?
        };
        Some(SectionRef {
            svma: s.addr,
            size: s.size,
            file_offset: usize::try_from(s.offset).unwrap_or(usize::MAX),
            data,
        })
    }

    /// True when the section named `name` is compressed (`SHF_COMPRESSED`).
    pub fn is_section_compressed(&self, name: &str) -> bool {
        self.sections
            .iter()
            .any(|s| s.name == name && s.flags & u64::from(section_header::SHF_COMPRESSED) != 0)
    }

    /// The file bytes of a section, if its range is inside the file.
    fn section_bytes(&self, s: &Section) -> Option<&[u8]> {
        let start = usize::try_from(s.offset).ok()?;
        let end = start.checked_add(usize::try_from(s.size).ok()?)?;
        self.data.get(start..end)
    }

    /// The file-backed bytes at `svma..svma+len` of a loadable segment, if all present in
    /// the file (not in the zero-filled tail of a segment).
    pub fn read_svma(&self, svma: u64, len: usize) -> Option<&[u8]> {
        let seg = self
            .segments
            .iter()
            .find(|s| svma >= s.vaddr && svma < s.vaddr + s.memsz)?;
        let rel = svma - seg.vaddr;
        if rel.checked_add(len as u64)? > seg.filesz {
            return None;
        }
        let start = usize::try_from(seg.offset + rel).ok()?;
        self.data.get(start..start.checked_add(len)?)
    }

    /// The bytes of the instruction at `svma`: the longest an x86-64 instruction can be
    /// (15), or fewer where the segment's file bytes end sooner. The last instructions of a
    /// program's text (a store right before the outlined OpenMP function's `leave; ret`,
    /// when that function is the last one) are as much code as any other.
    pub fn instruction_bytes(&self, svma: u64) -> Option<&[u8]> {
        let seg = self
            .segments
            .iter()
            .find(|s| svma >= s.vaddr && svma < s.vaddr + s.filesz)?;
        let len = (seg.vaddr + seg.filesz - svma).min(MAX_INSTRUCTION_BYTES);
        self.read_svma(svma, len as usize)
    }

    /// The svma ranges of the function symbols (FUNC and IFUNC) with nonzero size.
    pub fn function_ranges(&self) -> Vec<(String, Range<u64>)> {
        self.symbols
            .iter()
            .filter(|s| s.kind != SymKind::Object && s.size > 0)
            .map(|s| (s.name.clone(), s.addr..s.addr + s.size))
            .collect()
    }

    /// True when the file carries DWARF debug info (a `.debug_info` section).
    pub fn has_debug_info(&self) -> bool {
        self.section(".debug_info")
            .is_some_and(|s| !s.data.is_empty())
    }

    /// The svma ranges covered by DWARF compile units (from `DW_AT_ranges` or
    /// `DW_AT_low_pc`/`DW_AT_high_pc` of each unit), sorted and merged. Empty when the
    /// file has no (uncompressed) DWARF.
    pub fn dwarf_code_ranges(&self) -> Vec<Range<u64>> {
        if !self.has_debug_info() || self.is_section_compressed(".debug_info") {
            return Vec::new();
        }
        super::elf_dwarf::unit_ranges(self)
    }

    /// The name and `sh_flags` of the allocated (`SHF_ALLOC`) section containing `svma`.
    pub fn allocated_section_at(&self, svma: u64) -> Option<(&str, u64)> {
        self.sections
            .iter()
            .find(|s| {
                s.flags & u64::from(section_header::SHF_ALLOC) != 0
                    && svma >= s.addr
                    && svma - s.addr < s.size
            })
            .map(|s| (s.name.as_str(), s.flags))
    }

    /// The file's GNU build-id (`NT_GNU_BUILD_ID` note), which names its separate debug
    /// file (`/usr/lib/debug/.build-id/xx/rest.debug`).
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// The `.gnu_debuglink` section: the file name of the separate debug file and the
    /// CRC-32 of that file's contents.
    pub fn debuglink(&self) -> Option<(&str, u32)> {
        let data = self.section(".gnu_debuglink")?.data;
        let (name, _) = c_string(data)?;
        // The CRC follows the name's NUL, padded to a multiple of 4.
        let at = (name.len() + 1).next_multiple_of(4);
        let crc = data.get(at..at + 4)?;
        let crc = u32::from_le_bytes(crc.try_into().ok()?);
        (!name.is_empty()).then_some((name, crc))
    }

    /// The `.gnu_debugaltlink` section of a debug file (dwz): the path of the supplementary
    /// debug file shared by several packages' files, and that file's build-id.
    pub fn debugaltlink(&self) -> Option<(&str, &[u8])> {
        let data = self.section(".gnu_debugaltlink")?.data;
        let (name, build_id) = c_string(data)?;
        (!name.is_empty()).then_some((name, build_id))
    }

    /// All `STT_FUNC` symbols (from `.symtab` and `.dynsym`) defined in this file, as
    /// (name, svma), sorted by address. Names are not demangled.
    pub fn function_symbols(&self) -> Vec<(&str, u64)> {
        self.symbols
            .iter()
            .filter(|s| s.kind == SymKind::Func)
            .map(|s| (s.name.as_str(), s.addr))
            .collect()
    }
}

/// The `NT_GNU_BUILD_ID` note of a parsed file: from its note sections, else from its
/// `PT_NOTE` segments (a file without section headers).
fn build_id_note(elf: &Elf<'_>, data: &[u8]) -> Option<Vec<u8>> {
    let is_build_id = |n: &goblin::elf::note::Note<'_>| {
        n.n_type == goblin::elf::note::NT_GNU_BUILD_ID
            && n.name.trim_end_matches('\0') == "GNU"
            && !n.desc.is_empty()
    };
    let from = |notes: Option<goblin::elf::note::NoteIterator<'_>>| {
        notes?
            .filter_map(Result::ok)
            .find(|n| is_build_id(n))
            .map(|n| n.desc.to_vec())
    };
    from(elf.iter_note_sections(data, None)).or_else(|| from(elf.iter_note_headers(data)))
}

/// A NUL-terminated string at the start of `bytes`, and the bytes after its NUL.
fn c_string(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let nul = bytes.iter().position(|&b| b == 0)?;
    let s = std::str::from_utf8(&bytes[..nul]).ok()?;
    Some((s, &bytes[nul + 1..]))
}

/// Sort key for choosing among aliases: fewer leading underscores, global, shorter.
fn symbol_rank(s: &Symbol) -> (usize, bool, usize) {
    let underscores = s.name.bytes().take_while(|&b| b == b'_').count();
    (underscores, s.binding != sym::STB_GLOBAL, s.name.len())
}

/// The longest an x86-64 instruction can be.
const MAX_INSTRUCTION_BYTES: u64 = 15;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instruction_bytes_stop_where_the_segment_ends() {
        let t = ElfFile::load(Path::new("/bin/true")).unwrap();
        let sections = t.executable_sections();
        let first = sections.iter().map(|s| s.0).min().unwrap();
        assert_eq!(t.instruction_bytes(first).map(<[u8]>::len), Some(15));
        let (svma, bytes) = *sections.iter().max_by_key(|s| s.0).unwrap();
        let end = svma + bytes.len() as u64;
        // The last byte of the last executable section: as many bytes as the segment
        // still has (at least that one), where a fixed 16-byte read found none.
        let last = t.instruction_bytes(end - 1).unwrap();
        assert!(!last.is_empty() && last.len() <= 15);
        assert_eq!(last[0], bytes[bytes.len() - 1]);
    }

    #[test]
    fn libc_symbols() {
        let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        let again = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        assert!(Arc::ptr_eq(&libc, &again));
        let lock = libc.function_addresses("pthread_mutex_lock");
        assert_eq!(lock.len(), 1, "{lock:x?}");
        let wait = libc.function_addresses("pthread_cond_wait");
        assert!(wait.len() >= 2, "versioned duplicates: {wait:x?}");
        let (name, off) = libc.symbolize(lock[0] + 3).unwrap();
        assert!(name.contains("pthread_mutex_lock"), "{name}");
        assert_eq!(off, 3);
        assert!(!libc.is_static());
        assert!(libc.is_pie());
        assert!(!libc.executable_sections().is_empty());
        assert!(libc
            .function_addresses("no_such_function_mcheck")
            .is_empty());
        let bytes = libc.read_svma(lock[0], 4).unwrap();
        assert_eq!(bytes.len(), 4);
    }

    #[test]
    fn true_basics() {
        let t = ElfFile::load(Path::new("/bin/true")).unwrap();
        assert_eq!(t.first_load_vaddr(), 0);
        assert_ne!(t.entry(), 0);
        assert_eq!(t.svma_for_file_offset(0), Some(0));
        assert!(t.interpreter().unwrap().contains("ld-linux"));
    }
}
